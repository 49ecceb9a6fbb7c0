"""An example judgefuse plugin: each module registers one extension when its entry point loads."""
