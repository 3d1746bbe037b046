"""How much of the machine a variant used: FLOPs per step, the measured peak, MFU."""
