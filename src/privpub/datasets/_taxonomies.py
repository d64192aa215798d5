"""Public generalisation hierarchies of the built-in datasets (decision spec, Appendix A)."""

from __future__ import annotations

from typing import Any

__all__ = ["ADULT_TAXONOMIES"]

#: Fung et al. (TKDE 2007) taxonomies of Adult, as used by DiffGen (spec Appendix A); public metadata
ADULT_TAXONOMIES: dict[str, Any] = {
    "workclass": {"Any": [{"Worked": [{"With-Pay": ["Private", {"Self-emp": ["Self-emp-not-inc", "Self-emp-inc"]},
                                                    {"Gov": ["Federal-gov", "Local-gov", "State-gov"]}]},
                                      "Without-pay"]}, "Never-worked"]},
    "education": {"Any": [
        {"Without-Post-Secondary": ["Preschool", {"Elementary": ["1st-4th", "5th-6th", "7th-8th"]},
                                    {"Secondary": [{"Junior-Secondary": ["9th", "10th"]},
                                                   {"Senior-Secondary": ["11th", "12th", "HS-grad"]}]}]},
        {"Post-secondary": ["Some-college", {"Assoc": ["Assoc-acdm", "Assoc-voc"]},
                            {"University": ["Bachelors", "Prof-school", {"Post-grad": ["Masters", "Doctorate"]}]}]}]},
    "marital-status": {"Any": [{"Married": [{"Partner-present": ["Married-civ-spouse", "Married-AF-spouse"]},
                                            {"Partner-absent": ["Divorced", "Separated", "Widowed",
                                                                "Married-spouse-absent"]}]},
                               "Never-married"]},
    "occupation": {"Any": [
        {"White-collar": ["Exec-managerial", "Prof-specialty", "Sales", "Adm-clerical"]},
        {"Blue-collar": ["Tech-support", "Craft-repair", "Machine-op-inspct", "Handlers-cleaners",
                         "Transport-moving", "Priv-house-serv"]},
        {"Other": ["Protective-serv", "Armed-Forces", "Farming-fishing", "Other-service"]}]},
    "relationship": {"Any": [{"In-family": ["Wife", "Own-child", "Husband"]}, "Not-in-family", "Other-relative",
                             "Unmarried"]},
    "race": {"Any": ["White", {"Colored": ["Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]}]},
    "sex": {"Any": ["Female", "Male"]},
    "native-country": {"Any": [
        {"North-America": [{"USA": ["United-States", "Outlying-US(Guam-USVI-etc)"]}, "Canada"]},
        {"Middle-America": ["Mexico", "Honduras", "Guatemala", "Nicaragua", "El-Salvador"]},
        {"South-America": [{"Western-South-America": ["Ecuador", "Peru"]}, {"Northern-South-America": ["Columbia"]},
                           {"Caribbean": ["Puerto-Rico", "Dominican-Republic", "Jamaica", "Cuba", "Haiti",
                                          "Trinadad&Tobago"]}]},
        {"Europe": [{"Western-Europe": ["France", "England", "Ireland", "Scotland", "Holand-Netherlands"]},
                    {"Southern-Europe": ["Italy", "Greece"]}, {"Southwestern-Europe": ["Portugal"]},
                    {"Southeastern-Europe": ["Yugoslavia"]}, {"Central-Europe": ["Hungary", "Germany", "Poland"]}]},
        {"Asia": [{"Southeastern-Asia": ["Philippines", "Thailand", "Cambodia", "Vietnam", "Laos"]},
                  {"Southern-Asia": ["India"]}, {"Eastern-Asia": ["Japan", "China", "Hong", "Taiwan", "South"]},
                  {"Middle-East": ["Iran"]}]}]},
}
