# SPDX-License-Identifier: Apache-2.0
"""Delta transfer of a new image version against one already elsewhere."""
