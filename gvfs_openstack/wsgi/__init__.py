# SPDX-License-Identifier: Apache-2.0
"""Modules WSGI servers import (uwsgi ``module=``, gunicorn, mod_wsgi)."""
