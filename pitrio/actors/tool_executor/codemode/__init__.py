"""pi 1.6.0's ``codemode`` tool: a JavaScript script that calls the session's other tools.

``sandbox`` runs a script in a QuickJS engine process; ``source`` reads its options line;
``output`` lays out its result; ``tool`` is the tool itself.
"""
