"""The machine a run is on: defaults from it and the checks of torchrun / `accelerate launch` (`launch`), the thread
count (`threads`), the names of the precisions a run computes in (`precisions`), the precision of a run on a CPU
(`cpu_precision`) and whether bf16 pays on this CPU for this model (`cpu_arithmetic`: its bf16 instructions, the
probe, its cache)."""
