"""The ``hookyard`` command as a user runs it: ``up`` with its embedded servers, ``listen``, ``trigger``, ``tail``
and ``open``, as subprocesses against real servers."""
