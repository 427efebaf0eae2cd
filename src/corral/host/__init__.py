"""The host side: the pool of workers, sessions, and host functions."""
