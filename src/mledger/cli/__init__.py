"""The command-line frontends, the top of the layer diagram (nothing in mledger imports them).

* :mod:`mledger.cli._mledger` - ``mledger``: generate, prepare, replay, report, standalone, demo
  (also ``python -m mledger.cli``);
* :mod:`mledger.cli._admin` - ``mledger-admin``: pulsar-admin's ``topics`` commands over a data
  directory or a running server, and ``serve`` (the REST admin server).

They parse arguments, call the library (:mod:`mledger.replay`, :class:`mledger.admin.Admin`,
:mod:`mledger.standalone`, :mod:`mledger.rest`, :mod:`mledger.report`) and print; the logic
stays in those layers.
"""

from ._mledger import main as main

__all__ = ["main"]
