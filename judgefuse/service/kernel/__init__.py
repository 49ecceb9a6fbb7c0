"""The service's kernel: what every slice uses and no slice owns (docs/design.md, 'Architecture').

Started panels and their fusion methods (:mod:`.panels`), the service's metrics with the
sojourn and event-loop-lag probes backpressure reads (:mod:`.metrics`, :mod:`.sojourn`,
:mod:`.loop_lag`), the compare-and-set update of a shared state blob (:mod:`.shared_state`),
text every backend can store and the verdict-id check built on it (:mod:`.stored_text`),
annotator identity (:mod:`.accounts`) and the serving-state protocols the slices read the
gateway through (:mod:`.serving`). It imports the service's base (storage, ledger, schemas,
settings, errors) and no slice.
"""
