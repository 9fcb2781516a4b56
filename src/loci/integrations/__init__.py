"""Adapters that plug Loci into other libraries' interfaces; each needs its library
installed and is imported only by those who use it."""
