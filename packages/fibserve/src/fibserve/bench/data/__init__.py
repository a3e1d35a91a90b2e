"""What a workload's evaluation runs on (trusted side): seeded and definition-aware inputs (:mod:`.inputs`),
inputs derived from others such as FP8 scales (:mod:`.derived`), the definition's reference and the cache of
its outputs (:mod:`.reference`), and the checks that refuse workloads whose reference outputs cannot tell a
right kernel from a wrong one (:mod:`.degenerate`)."""
