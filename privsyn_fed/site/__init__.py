"""The site role: a silo's light process that answers declared queries and shares each answer
with the compute servers; numpy, TLS and ``cryptography`` only, no torch.

* ``client``: one site's side of a release (``Site``) and several sites in one process
  (``site_main``); the shares, their sealing and the frames are ``mpc.envelope`` and ``mpc.wire``;
* ``setup``: what a site was given, checked before it connects (``privsyn-fed site run``).
"""
