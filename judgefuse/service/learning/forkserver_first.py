"""Imported first, and only, by the refit forkserver (its preload list in :mod:`.refit_worker`):
the forkserver steps back (lowest priority, off the gateway's CPUs) before it imports the
fitting code, so those seconds of imports never run on the serving core at the gateway's
priority (:mod:`.worker_priority` says what was measured). Importing it anywhere else would do
the same to that process: nothing else imports it.
"""

from __future__ import annotations

import os

from judgefuse.service.learning.worker_priority import step_back

step_back(os.getppid())  # the forkserver's parent is the process that started it: the gateway
