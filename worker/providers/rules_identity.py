"""The offline rules' word lists: who the user says they are.

``rules_patterns`` finds the phrasing ("I'm Grace", "I'm a nurse", "I'm vegan", "I
work with Rust"); the functions here judge the words it caught, so that a clause
of the right shape but the wrong words gives nothing: "I'm Sorry" names nobody,
"I'm a huge fan" is no job, "I'm vegan-curious" no diet. Closed lists, on purpose:
a word missing from one costs a fact; a word wrongly taken makes a false memory.
Pure functions over a cleaned value, no patterns: each word is looked up once.
"""

from __future__ import annotations

# ---------------------------------------------------------------- names

# Capitalised words after "I'm" that are not names: states, "-ing" forms and fillers
# (a Title Case line, "I'm Not Sure", "I'm Going Home"), and nationalities, faiths and
# diets, which English capitalises or a user may ("I'm Canadian", "I'm Vegan").
_STATES = """
sorry tired fine ok okay good great well sure not back here home done ready happy sad
glad new so very really also still afraid busy late early lost confused curious excited
interested sick ill bored hungry thirsty stuck pregnant married single divorced engaged
retired unemployed alone alright awake asleep free available away out off up down over
all into with about from just only too even definitely probably totally literally
basically actually currently honestly pretty quite kinda always never usually sometimes
often finally already now again there nobody somebody someone everyone anyone both
no yes yeah nope right wrong young old older younger big tall short human male female
gay straight bi trans nonbinary honest serious certain positive aware alive dead safe
nervous worried scared anxious stressed upset angry mad lonely broke rich poor famous
anonymous yours mine gonna wanna gotta totes thankful grateful blessed lucky hopeful
fluent native bilingual left right-handed left-handed vegan vegetarian pescatarian
christian catholic protestant orthodox jewish muslim hindu buddhist sikh atheist
agnostic mormon pagan the a an in on at of to for by my your his her their our its this
that these those what which who how why when where if
going trying looking thinking working using learning getting having doing making moving
leaving coming starting planning writing reading running waiting feeling hoping
wondering asking telling saying kidding joking calling talking staying living studying
visiting travelling traveling flying driving heading sitting standing watching playing
"""
_DEMONYMS = """
american canadian mexican brazilian argentinian argentine chilean colombian peruvian
cuban british english scottish welsh irish french german dutch belgian swiss austrian
italian spanish portuguese greek turkish polish czech slovak hungarian romanian
bulgarian serbian croatian slovenian bosnian albanian ukrainian russian belarusian
lithuanian latvian estonian finnish swedish norwegian danish icelandic chinese japanese
korean vietnamese thai filipino filipina indonesian malaysian singaporean indian
pakistani bangladeshi lankan nepali afghan iranian iraqi syrian lebanese israeli
palestinian jordanian saudi emirati egyptian moroccan algerian tunisian nigerian
ghanaian kenyan ethiopian somali african australian aussie kiwi european asian latino
latina hispanic arab jamaican haitian rican dominican venezuelan ecuadorian bolivian
uruguayan paraguayan scandinavian nordic zealander kurdish armenian georgian
azerbaijani kazakh uzbek mongolian tibetan taiwanese cantonese maori samoan fijian
cameroonian senegalese ivorian congolese ugandan tanzanian rwandan zimbabwean zambian
sudanese libyan yemeni omani qatari kuwaiti bahraini maltese cypriot luxembourgish
catalan basque galician flemish bavarian texan californian londoner parisian berliner
south north east west central
"""
NOT_NAMES = frozenset((_STATES + _DEMONYMS).split())
MAX_NAME_WORDS = 3


def intro_name(value: str) -> str | None:
    """The name in "I'm <value>": one to three capitalised words, none of them a state,
    a nationality or a filler, none shouted (all capitals) or possessive ("Bob's")."""
    words = value.split()
    if not 1 <= len(words) <= MAX_NAME_WORDS:
        return None
    for word in words:
        if (not word[:1].isupper() or word.casefold() in NOT_NAMES
                or (len(word) > 1 and word.isupper()) or word.casefold().endswith("'s")):
            return None
    return value


# ---------------------------------------------------------------- jobs

# "I'm a <job>": the job is the last of at most MAX_JOB_WORDS words, and a word of this
# list ("I'm a senior data scientist"); anything else ("I'm a big fan", "I'm a bit
# lost") is not a job.
_JOBS = """
nurse doctor physician surgeon dentist pharmacist paramedic radiographer midwife
therapist physiotherapist psychologist psychiatrist counsellor counselor vet
veterinarian optician optometrist dietitian nutritionist paediatrician pediatrician
anaesthetist anesthesiologist cardiologist radiologist dermatologist neurologist
oncologist sonographer hygienist orthodontist chiropractor osteopath podiatrist
teacher lecturer professor tutor librarian researcher scientist engineer developer
programmer designer architect analyst accountant auditor bookkeeper lawyer attorney
solicitor barrister paralegal judge consultant manager director executive founder
entrepreneur freelancer contractor clerk secretary receptionist administrator cashier
barista bartender waiter waitress chef cook baker butcher farmer gardener florist
carpenter electrician plumber mechanic technician welder builder painter decorator
driver pilot sailor soldier firefighter policeman policewoman detective journalist
reporter editor writer author novelist poet translator interpreter photographer
artist illustrator animator musician singer composer actor actress dancer producer
filmmaker coach trainer athlete banker broker trader economist statistician
mathematician physicist chemist biologist geologist astronomer archaeologist historian
philosopher sociologist linguist surveyor planner realtor salesperson salesman
saleswoman marketer recruiter hairdresser barber beautician cleaner janitor caretaker
carer nanny babysitter housekeeper courier postman miner fisherman lifeguard steward
stewardess dispatcher machinist tailor jeweller jeweler potter sculptor locksmith
roofer bricklayer tiler glazier copywriter tester sysadmin ceo cto cfo coo
"""
JOBS = frozenset(_JOBS.split())
# Words before the job that say it is not the user's work now: "I'm a retired teacher",
# "a terrible cook", "a home cook", "an aspiring writer".
_NOT_AT_WORK_WORDS = """
retired former ex failed aspiring wannabe would-be budding amateur hobby hobbyist home
weekend terrible bad good great decent awful lousy poor big huge keen avid enthusiastic
natural born trainee student future
"""
_NOT_AT_WORK = frozenset(_NOT_AT_WORK_WORDS.split())
# Words that make the words before the job a phrase, not a title: "a fan of the chef".
_NOT_A_TITLE_WORDS = "of the a an to with and or for in at on from my your his her"
_NOT_A_TITLE = frozenset(_NOT_A_TITLE_WORDS.split())
MAX_JOB_WORDS = 4


def job_title(value: str) -> str | None:
    """The job in "I'm a <value>", or None when the value names none."""
    words = value.split()
    if not 1 <= len(words) <= MAX_JOB_WORDS or words[-1].casefold() not in JOBS:
        return None
    before = {w.casefold() for w in words[:-1]}
    if before & (_NOT_AT_WORK | _NOT_A_TITLE):
        return None
    return value


# ---------------------------------------------------------------- diets and identities

# One of these at a time: "I'm vegan now" replaces "Is vegetarian".
DIETS = (
    "vegetarian", "vegan", "pescatarian", "pescetarian", "flexitarian", "plant-based",
    "lacto-vegetarian", "ovo-vegetarian", "fruitarian",
)
# These hold beside a diet and beside each other.
_IDENTITIES = (
    "gluten-free", "dairy-free", "lactose intolerant", "lactose-intolerant", "coeliac",
    "celiac", "diabetic", "teetotal", "teetotaler", "teetotaller", "kosher", "halal",
)
IDENTITIES = frozenset(DIETS + _IDENTITIES)


def identity(value: str) -> str | None:
    """The diet or identity in "I'm <value>" ("vegetarian", "lactose intolerant"),
    lower-cased, or None when the value is not one of them as a whole."""
    folded = " ".join(value.casefold().split())
    return folded if folded in IDENTITIES else None


# ---------------------------------------------------------------- tools and food

# "I work with <value>": a tool, a language, a material; not people ("my team",
# "them") nor an amount ("a lot of data").
_NOT_TOOLS_WORDS = """
my our your his her their him them us me you he she they it this that a an some
people someone somebody everyone anyone others
"""
_NOT_TOOLS = frozenset(_NOT_TOOLS_WORDS.split())
# "I don't eat <value>": food, not a manner ("much", "out", "late").
_NOT_FOOD_WORDS = "much enough well out late early fast properly right anything everything"
_NOT_FOOD = frozenset(_NOT_FOOD_WORDS.split())


def tool(value: str) -> str | None:
    first = value.split()[0].casefold()
    return None if first in _NOT_TOOLS else value


def food(value: str) -> str | None:
    words = value.split()
    if words[0].casefold() in _NOT_FOOD or words[0].casefold() in _NOT_TOOLS:
        return None
    return value
