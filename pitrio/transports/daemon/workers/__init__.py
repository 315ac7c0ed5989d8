"""``pitrio serve --workers N``: N trio worker processes behind one port.

:mod:`.acceptor` (the parent process) owns the listening socket: it reads each request head,
picks the worker (:mod:`.table`: the one owning the session a ``/v1/sessions/{id}`` names, else
the least loaded) and passes it the socket's descriptor and the bytes already read over a Unix
socket (``SCM_RIGHTS``, :mod:`.channel`) and keeps its own copy until the worker acknowledged
it (a worker dying first has it given to another; none in time: a 503); the worker serves the
connection itself, so no session byte crosses a second process. :mod:`.worker` is a worker's
process; :mod:`.host_socket` its ``/v1/host`` endpoint, which lists and creates across workers
through the acceptor and streams every worker's host events (:mod:`.relay`).
"""
