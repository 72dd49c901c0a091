# SPDX-License-Identifier: Apache-2.0
"""Images on the DTN export: ``gvfs://`` locations and golden references."""
