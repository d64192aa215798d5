"""privpub.decision: release a generalised decision table (MAXGDDP) and train a classifier on it.

Run: python examples/decision.py   (scikit-learn's Iris, no download; a few seconds)
"""

from __future__ import annotations

import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

from privpub.datasets import iris
from privpub.decision import MAXGDDP

data = iris(rng=0, shuffle=True)                      # TableDataset with a declared public schema
train, test = train_test_split(data.frame, test_size=0.3, random_state=0, stratify=data.frame["class"])

release = MAXGDDP(levels=5).publish(train, schema=data.schema, epsilon=1.0, rng=0)
print(release.cells.head())                           # generalised values, class, noisy count
print(release.ledger)                                 # per-level report-noisy-max + leaf counts

synthetic = release.synthetic()                       # each cell repeated by its noisy count
features = [c for c in synthetic.columns if c != "class"]
X_syn = pd.get_dummies(synthetic[features].astype(str))           # one-hot of the generalised values
X_test = pd.get_dummies(release.generalize(test)[features].astype(str))  # test set mapped onto the cut
X_test = X_test.reindex(columns=X_syn.columns, fill_value=0)

clf = DecisionTreeClassifier(random_state=0).fit(X_syn, synthetic["class"])
print(f"accuracy on the held-out test set: {clf.score(X_test, test['class']):.3f}")
