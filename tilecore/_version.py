"""Version of the tilecore distribution and of the plugin API it implements."""

__version__ = "0.1.0"

#: (major, minor) of the plugin API.  A backend declares the version it was
#: written for as ``tilecore_api_version = "1.0"``; a different major is refused.
#: 1.1 added the optional hook ``tilecore_doctor_target`` and ``tilecore_role``.
API_VERSION: tuple[int, int] = (1, 1)
