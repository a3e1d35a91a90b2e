"""How fast a candidate is against what it is compared with (trusted side): the interleaved timing loop
(:mod:`.loop`), the comparators' timing twins (:mod:`.comparators`, :mod:`.twin`, :mod:`.sides`), the defences
on timed calls (:mod:`.checks`, :mod:`.guard`, :mod:`.blame`, :mod:`.neighbour_bias`), the statistics
(:mod:`.statistics`) and the roofline plausibility check (:mod:`.roofline`)."""
