"""Decision-data release under differential privacy (paper 003: MAXGDDP; baseline DiffGen).

Publishers take a table with a class column and a public :class:`~privpub.core.Schema` and
release a generalised contingency table with noisy per-class counts, fit for training
classifiers::

    release = MAXGDDP(levels=13).publish(df, schema=schema, epsilon=1.0, rng=0)
    release.cells, release.synthetic(), release.generalize(test_df), release.ledger

References: Fu, Zhang, Ding, J. on Communications 2018 (doi:10.11959/j.issn.1000-436x.2018049);
Mohammed, Chen, Fung, Yu, KDD 2011 (DiffGen).
"""

from __future__ import annotations

from privpub.core import CategoricalAttribute, NumericAttribute, Schema
from privpub.decision._diffgen import DiffGen
from privpub.decision._maxgddp import MAXGDDP
from privpub.decision._model import Specialization
from privpub.decision._release import DecisionRelease, TablePublisher
from privpub.decision._synth import AIM, MST, SyntheticRelease
from privpub.decision._taxonomy import Taxonomy, load_taxonomies

#: publishers by CLI name
PUBLISHERS: dict[str, type[TablePublisher]] = {"maxgddp": MAXGDDP, "diffgen": DiffGen, "aim": AIM, "mst": MST}

__all__ = [
    "AIM",
    "CategoricalAttribute",
    "DecisionRelease",
    "DiffGen",
    "MAXGDDP",
    "MST",
    "NumericAttribute",
    "PUBLISHERS",
    "Schema",
    "Specialization",
    "SyntheticRelease",
    "TablePublisher",
    "Taxonomy",
    "load_taxonomies",
]
