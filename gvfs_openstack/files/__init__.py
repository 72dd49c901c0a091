# SPDX-License-Identifier: Apache-2.0
"""Files written safely: durable replaces, and no link followed."""
