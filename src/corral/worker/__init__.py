"""The worker side: the zygote that forks workers, and the runtime that runs scripts in them."""
