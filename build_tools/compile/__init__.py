"""Compile csrc/ into the native libraries: flags, sources, compile and link, build facts."""
