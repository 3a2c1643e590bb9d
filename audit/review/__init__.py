"""Reviews over time (METHOD §10): audits of the same scope compared, pair by consecutive pair.

Reads audit.json documents only (no stage, no source): :func:`load` reads an audit.json file or
audits a case folder in memory; :func:`review` builds the review.json document (docs/review.md):

* ``load``: the inputs, with accessors that name the file and key of a bad figure;
* ``comparable``: whether a pair may be bridged (method version, cost basis, scope, currency), and coverage;
* ``effects``: a service's change split exactly into volume, price, efficiency and overhead;
* ``bridge``: the steps from the earlier total to the later one, and the services side by side;
* ``buckets``: bucket amounts and shares side by side, with the part that moved most;
* ``lines``: services, SKUs and accounts that appeared or vanished above the threshold;
* ``realised``: the shipped options' realised savings against their projection;
* ``words``: each driver in words;
* ``document``: review.json.
"""
from __future__ import annotations

from audit.review.document import review
from audit.review.load import Audit, load

__all__ = ["Audit", "load", "review"]
