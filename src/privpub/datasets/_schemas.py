"""Public schemas of the tabular datasets, declared from public metadata (never from the data).

* Adult: categories from UCI's ``adult.names`` (in the order listed there); numeric bounds are the
  public DiffGen hierarchy roots used by the decision spec (Appendix A), e.g. age in [15, 95).
* Census-Income (KDD): UCI's ``census-income.names`` is not in the data folder, so the category
  lists of its 33 nominal columns were frozen once, as documented public metadata, from the
  distinct values (``?`` excluded) of the UCI test file; they are never recomputed at run time
  (decision spec, Appendix A: 494 values over 33 columns). Numeric bounds as in Appendix A.
* Iris: the three UCI class labels; numeric bounds [4.0, 8.0], [2.0, 4.5], [1.0, 7.0], [0.0, 2.6]
  at resolution 0.1 (decision spec).
* NLTCS: 16 binary attributes named ``"0"`` .. ``"15"`` (the source's ``nltcs.json``: discrete,
  domain 2).

Numeric bounds are half-open ``[lo, hi)`` in the specs; :class:`~privpub.core.NumericAttribute`
closes them at ``hi``, which contains the same ticks.
"""

from __future__ import annotations

from privpub.core import CategoricalAttribute, NumericAttribute, Schema

__all__ = [
    "ADULT_COLUMNS",
    "CENSUS_INTEGER_NOMINAL",
    "CENSUS_CATEGORIES",
    "CENSUS_COLUMNS",
    "IRIS_CLASSES",
    "IRIS_COLUMNS",
    "adult_schema",
    "census_schema",
    "iris_schema",
    "nltcs_schema",
]

ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
)

_ADULT_CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked"),
    "education": ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc",
                  "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th",
                  "Preschool"),
    "marital-status": ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"),
    "occupation": ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
                   "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
                   "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
                   "Armed-Forces"),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native-country": (
        "United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
        "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
        "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
        "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
        "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
        "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands",
    ),
}

_ADULT_NUMERIC: dict[str, tuple[float, float]] = {
    "age": (15, 95),
    "fnlwgt": (0, 1_500_000),
    "education-num": (1, 20),
    "capital-gain": (0, 100_000),
    "capital-loss": (0, 5_000),
    "hours-per-week": (1, 100),
}


def adult_schema() -> Schema:
    """The public schema of Adult: 14 attributes (6 numeric, 8 categorical) and the class ``income``."""
    attrs: list[CategoricalAttribute | NumericAttribute] = []
    for name in ADULT_COLUMNS[:-1]:
        if name in _ADULT_NUMERIC:
            lo, hi = _ADULT_NUMERIC[name]
            attrs.append(NumericAttribute(name, lo, hi, 1.0))
        else:
            attrs.append(CategoricalAttribute(name, _ADULT_CATEGORIES[name]))
    return Schema(tuple(attrs), class_name="income", classes=("<=50K", ">50K"))


IRIS_COLUMNS = ("sepal.length", "sepal.width", "petal.length", "petal.width", "class")
IRIS_CLASSES = ("Iris-setosa", "Iris-versicolor", "Iris-virginica")
_IRIS_NUMERIC = {
    "sepal.length": (4.0, 8.0),
    "sepal.width": (2.0, 4.5),
    "petal.length": (1.0, 7.0),
    "petal.width": (0.0, 2.6),
}


def iris_schema() -> Schema:
    """The public schema of Iris: four measurements in cm (resolution 0.1) and the class ``class``."""
    attrs = [NumericAttribute(n, lo, hi, 0.1) for n, (lo, hi) in _IRIS_NUMERIC.items()]
    return Schema(tuple(attrs), class_name="class", classes=IRIS_CLASSES)


def nltcs_schema() -> Schema:
    """The public schema of NLTCS: 16 binary attributes ``"0"`` .. ``"15"``, categories ``"0"``, ``"1"``."""
    return Schema(tuple(CategoricalAttribute(str(i), ("0", "1")) for i in range(16)))


CENSUS_COLUMNS = (
    "age", "class of worker", "detailed industry recode", "detailed occupation recode", "education",
    "wage per hour", "enroll in edu inst last wk", "marital stat", "major industry code",
    "major occupation code", "race", "hispanic origin", "sex", "member of a labor union",
    "reason for unemployment", "full or part time employment stat", "capital gains", "capital losses",
    "dividends from stocks", "tax filer stat", "region of previous residence",
    "state of previous residence", "detailed household and family stat",
    "detailed household summary in household", "instance weight", "migration code-change in msa",
    "migration code-change in reg", "migration code-move within reg", "live in this house 1 year ago",
    "migration prev res in sunbelt", "num persons worked for employer", "family members under 18",
    "country of birth father", "country of birth mother", "country of birth self", "citizenship",
    "own business or self employed", "fill inc questionnaire for veteran's admin", "veterans benefits",
    "weeks worked in year", "year", "income class",
)

_CENSUS_NUMERIC: dict[str, tuple[float, float]] = {
    "age": (0, 91),
    "wage per hour": (0, 10_000),
    "capital gains": (0, 100_000),
    "capital losses": (0, 5_000),
    "dividends from stocks": (0, 100_000),
    "num persons worked for employer": (0, 7),
    "weeks worked in year": (0, 53),
}

#: integer-coded nominal columns (kept as ints in the frame; categories are their decimal strings)
CENSUS_INTEGER_NOMINAL = (
    "detailed industry recode", "detailed occupation recode", "own business or self employed",
    "veterans benefits", "year",
)


def census_schema() -> Schema:
    """The public schema of Census-Income (KDD): 40 predictors (7 numeric, 33 nominal) and a class.

    The ``instance weight`` column is not an attribute (UCI: not to be used by classifiers).
    """
    attrs: list[CategoricalAttribute | NumericAttribute] = []
    for name in CENSUS_COLUMNS:
        if name in ("instance weight", "income class"):
            continue
        if name in _CENSUS_NUMERIC:
            lo, hi = _CENSUS_NUMERIC[name]
            attrs.append(NumericAttribute(name, lo, hi, 1.0))
        else:
            attrs.append(CategoricalAttribute(name, CENSUS_CATEGORIES[name]))
    return Schema(tuple(attrs), class_name="income class", classes=("- 50000", "50000+"))


# Frozen once from the UCI test file (``?`` excluded), sorted; see the module docstring.
CENSUS_CATEGORIES: dict[str, tuple[str, ...]] = {
    "class of worker": (
        "Federal government", "Local government", "Never worked", "Not in universe", "Private",
        "Self-employed-incorporated", "Self-employed-not incorporated", "State government", "Without pay",
    ),
    "detailed industry recode": (
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17",
        "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32", "33",
        "34", "35", "36", "37", "38", "39", "40", "41", "42", "43", "44", "45", "46", "47", "48", "49",
        "50", "51",
    ),
    "detailed occupation recode": (
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17",
        "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32", "33",
        "34", "35", "36", "37", "38", "39", "40", "41", "42", "43", "44", "45", "46",
    ),
    "education": (
        "10th grade", "11th grade", "12th grade no diploma", "1st 2nd 3rd or 4th grade", "5th or 6th grade",
        "7th and 8th grade", "9th grade", "Associates degree-academic program",
        "Associates degree-occup /vocational", "Bachelors degree(BA AB BS)", "Children",
        "Doctorate degree(PhD EdD)", "High school graduate", "Less than 1st grade",
        "Masters degree(MA MS MEng MEd MSW MBA)", "Prof school degree (MD DDS DVM LLB JD)",
        "Some college but no degree",
    ),
    "enroll in edu inst last wk": (
        "College or university", "High school", "Not in universe",
    ),
    "marital stat": (
        "Divorced", "Married-A F spouse present", "Married-civilian spouse present",
        "Married-spouse absent", "Never married", "Separated", "Widowed",
    ),
    "major industry code": (
        "Agriculture", "Armed Forces", "Business and repair services", "Communications", "Construction",
        "Education", "Entertainment", "Finance insurance and real estate", "Forestry and fisheries",
        "Hospital services", "Manufacturing-durable goods", "Manufacturing-nondurable goods",
        "Medical except hospital", "Mining", "Not in universe or children", "Other professional services",
        "Personal services except private HH", "Private household services", "Public administration",
        "Retail trade", "Social services", "Transportation", "Utilities and sanitary services",
        "Wholesale trade",
    ),
    "major occupation code": (
        "Adm support including clerical", "Armed Forces", "Executive admin and managerial",
        "Farming forestry and fishing", "Handlers equip cleaners etc",
        "Machine operators assmblrs & inspctrs", "Not in universe", "Other service",
        "Precision production craft & repair", "Private household services", "Professional specialty",
        "Protective services", "Sales", "Technicians and related support",
        "Transportation and material moving",
    ),
    "race": (
        "Amer Indian Aleut or Eskimo", "Asian or Pacific Islander", "Black", "Other", "White",
    ),
    "hispanic origin": (
        "All other", "Central or South American", "Chicano", "Cuban", "Do not know", "Mexican (Mexicano)",
        "Mexican-American", "NA", "Other Spanish", "Puerto Rican",
    ),
    "sex": (
        "Female", "Male",
    ),
    "member of a labor union": (
        "No", "Not in universe", "Yes",
    ),
    "reason for unemployment": (
        "Job leaver", "Job loser - on layoff", "New entrant", "Not in universe", "Other job loser",
        "Re-entrant",
    ),
    "full or part time employment stat": (
        "Children or Armed Forces", "Full-time schedules", "Not in labor force",
        "PT for econ reasons usually FT", "PT for econ reasons usually PT",
        "PT for non-econ reasons usually FT", "Unemployed full-time", "Unemployed part- time",
    ),
    "tax filer stat": (
        "Head of household", "Joint both 65+", "Joint both under 65", "Joint one under 65 & one 65+",
        "Nonfiler", "Single",
    ),
    "region of previous residence": (
        "Abroad", "Midwest", "Northeast", "Not in universe", "South", "West",
    ),
    "state of previous residence": (
        "Abroad", "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
        "Delaware", "District of Columbia", "Florida", "Georgia", "Idaho", "Illinois", "Indiana", "Iowa",
        "Kansas", "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota",
        "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey",
        "New Mexico", "New York", "North Carolina", "North Dakota", "Not in universe", "Ohio", "Oklahoma",
        "Oregon", "Pennsylvania", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah", "Vermont",
        "Virginia", "West Virginia", "Wisconsin", "Wyoming",
    ),
    "detailed household and family stat": (
        "Child 18+ ever marr Not in a subfamily", "Child 18+ ever marr RP of subfamily",
        "Child 18+ never marr Not in a subfamily", "Child 18+ never marr RP of subfamily",
        "Child 18+ spouse of subfamily RP", "Child <18 ever marr RP of subfamily",
        "Child <18 ever marr not in subfamily", "Child <18 never marr RP of subfamily",
        "Child <18 never marr not in subfamily", "Child <18 spouse of subfamily RP",
        "Child under 18 of RP of unrel subfamily", "Grandchild 18+ ever marr RP of subfamily",
        "Grandchild 18+ ever marr not in subfamily", "Grandchild 18+ never marr RP of subfamily",
        "Grandchild 18+ never marr not in subfamily", "Grandchild 18+ spouse of subfamily RP",
        "Grandchild <18 never marr RP of subfamily", "Grandchild <18 never marr child of subfamily RP",
        "Grandchild <18 never marr not in subfamily", "Householder", "In group quarters",
        "Nonfamily householder", "Other Rel 18+ ever marr RP of subfamily",
        "Other Rel 18+ ever marr not in subfamily", "Other Rel 18+ never marr RP of subfamily",
        "Other Rel 18+ never marr not in subfamily", "Other Rel 18+ spouse of subfamily RP",
        "Other Rel <18 ever marr RP of subfamily", "Other Rel <18 ever marr not in subfamily",
        "Other Rel <18 never marr child of subfamily RP", "Other Rel <18 never marr not in subfamily",
        "Other Rel <18 never married RP of subfamily", "Other Rel <18 spouse of subfamily RP",
        "RP of unrelated subfamily", "Secondary individual", "Spouse of RP of unrelated subfamily",
        "Spouse of householder",
    ),
    "detailed household summary in household": (
        "Child 18 or older", "Child under 18 ever married", "Child under 18 never married",
        "Group Quarters- Secondary individual", "Householder", "Nonrelative of householder",
        "Other relative of householder", "Spouse of householder",
    ),
    "migration code-change in msa": (
        "Abroad to MSA", "Abroad to nonMSA", "MSA to MSA", "MSA to nonMSA", "NonMSA to MSA",
        "NonMSA to nonMSA", "Nonmover", "Not identifiable", "Not in universe",
    ),
    "migration code-change in reg": (
        "Abroad", "Different county same state", "Different division same region", "Different region",
        "Different state same division", "Nonmover", "Not in universe", "Same county",
    ),
    "migration code-move within reg": (
        "Abroad", "Different county same state", "Different state in Midwest",
        "Different state in Northeast", "Different state in South", "Different state in West", "Nonmover",
        "Not in universe", "Same county",
    ),
    "live in this house 1 year ago": (
        "No", "Not in universe under 1 year old", "Yes",
    ),
    "migration prev res in sunbelt": (
        "No", "Not in universe", "Yes",
    ),
    "family members under 18": (
        "Both parents present", "Father only present", "Mother only present", "Neither parent present",
        "Not in universe",
    ),
    "country of birth father": (
        "Cambodia", "Canada", "China", "Columbia", "Cuba", "Dominican-Republic", "Ecuador", "El-Salvador",
        "England", "France", "Germany", "Greece", "Guatemala", "Haiti", "Holand-Netherlands", "Honduras",
        "Hong Kong", "Hungary", "India", "Iran", "Ireland", "Italy", "Jamaica", "Japan", "Laos", "Mexico",
        "Nicaragua", "Outlying-U S (Guam USVI etc)", "Panama", "Peru", "Philippines", "Poland", "Portugal",
        "Puerto-Rico", "Scotland", "South Korea", "Taiwan", "Thailand", "Trinadad&Tobago", "United-States",
        "Vietnam", "Yugoslavia",
    ),
    "country of birth mother": (
        "Cambodia", "Canada", "China", "Columbia", "Cuba", "Dominican-Republic", "Ecuador", "El-Salvador",
        "England", "France", "Germany", "Greece", "Guatemala", "Haiti", "Holand-Netherlands", "Honduras",
        "Hong Kong", "Hungary", "India", "Iran", "Ireland", "Italy", "Jamaica", "Japan", "Laos", "Mexico",
        "Nicaragua", "Outlying-U S (Guam USVI etc)", "Panama", "Peru", "Philippines", "Poland", "Portugal",
        "Puerto-Rico", "Scotland", "South Korea", "Taiwan", "Thailand", "Trinadad&Tobago", "United-States",
        "Vietnam", "Yugoslavia",
    ),
    "country of birth self": (
        "Cambodia", "Canada", "China", "Columbia", "Cuba", "Dominican-Republic", "Ecuador", "El-Salvador",
        "England", "France", "Germany", "Greece", "Guatemala", "Haiti", "Holand-Netherlands", "Honduras",
        "Hong Kong", "Hungary", "India", "Iran", "Ireland", "Italy", "Jamaica", "Japan", "Laos", "Mexico",
        "Nicaragua", "Outlying-U S (Guam USVI etc)", "Panama", "Peru", "Philippines", "Poland", "Portugal",
        "Puerto-Rico", "Scotland", "South Korea", "Taiwan", "Thailand", "Trinadad&Tobago", "United-States",
        "Vietnam", "Yugoslavia",
    ),
    "citizenship": (
        "Foreign born- Not a citizen of U S", "Foreign born- U S citizen by naturalization",
        "Native- Born abroad of American Parent(s)", "Native- Born in Puerto Rico or U S Outlying",
        "Native- Born in the United States",
    ),
    "own business or self employed": (
        "0", "1", "2",
    ),
    "fill inc questionnaire for veteran's admin": (
        "No", "Not in universe", "Yes",
    ),
    "veterans benefits": (
        "0", "1", "2",
    ),
    "year": (
        "94", "95",
    ),
}
