"""Whether a candidate's outputs are right (trusted side): the elementwise comparison with the reference
(:mod:`.compare`) and the correctness calls of one workload, with the input-mutation check and the run-time
PyTorch audit of Triton candidates (:mod:`.check`)."""
