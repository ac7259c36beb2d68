# The kernel backends (Sources/CRunLoop/kernel: rl_poll_uring.c, rl_poll_epoll.c).
# A loop waits on epoll, and moves to io_uring where the kernel allows it
# once one of its sockets' callouts asks for the ring, unless RL_BACKEND
# says epoll or io_uring (forced from the loop's making). `make check` runs
# the default; these run the C tests and the differential tests on one
# backend each, and check-uring the Swift tests too (most of their loops
# keep epoll by default; on io_uring they found an RLSocketPort reply
# order and a cross-thread invalidation that the C tests did not):
#   make check-uring   RL_BACKEND=io_uring (fails clearly where the kernel refuses it)
#   make check-epoll   RL_BACKEND=epoll (with the speed tricks; PLAIN=1 is epoll too)
.PHONY: check-uring check-epoll
check-uring: deps ## the C, differential and Swift tests with every loop on io_uring (RL_BACKEND=io_uring)
	RL_BACKEND=io_uring $(MAKE) --no-print-directory check-c check-diff check-swift
check-epoll: deps ## the C and differential tests with every loop on epoll (RL_BACKEND=epoll)
	RL_BACKEND=epoll $(MAKE) --no-print-directory check-c check-diff
