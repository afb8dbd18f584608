"""The TPU examples (examples/tpu/) run unmodified on the emulator.

Each script checks its result against torch itself (torch.testing.assert_close)
and prints the profiler's timing; the test runs it as ``__main__`` and checks both.
"""

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "tpu"


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(
    "name",
    ["reduce_max", "reduce_sum", "matmul", "flash_attention", "rope", "w8a16_mlp", "dequant_gemm_int4", "moe_routing", "flash_decoding"],
)
def test_example_runs_and_matches_torch(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    script = EXAMPLES / f"{name}.py"
    if not script.is_file():
        pytest.skip(f"{script} is not in this checkout")
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert f"{name}: matches torch" in out
    assert "ms per call" in out
