"""A generative grammar of a spoken-dialogue domain (travel, banking, calendar, weather, phone
calls, ...): what a caller says to an automated telephone agent.

Sentences are lower-case words, numbers spelled out ("two hundred and five", "oh five"), no
punctuation, so the text is directly the ASR reference.  Rules are ``$NAME -> alternatives``;
an alternative is a string of words and ``$NONTERMINALS``; ``[a|b c]`` is an optional group
(spoken with probability one half, then one of its choices) and ``(a|b c)`` a required choice.  Weights (``(w, "...")``) make some alternatives more likely.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

ONES = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen"]
TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
ORD_ONES = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
ORD_TEENS = ["tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth",
             "sixteenth", "seventeenth", "eighteenth", "nineteenth"]
ORD_TENS = {"twenty": "twentieth", "thirty": "thirtieth"}

FIRST_NAMES = """james john robert michael william david richard joseph thomas charles
christopher daniel matthew anthony mark donald steven paul andrew joshua kenneth kevin brian
george edward ronald timothy jason jeffrey ryan jacob gary nicholas eric jonathan stephen larry
justin scott brandon benjamin samuel frank gregory raymond patrick jack dennis jerry tyler aaron
henry peter mary patricia jennifer linda elizabeth barbara susan jessica sarah karen nancy lisa
betty margaret sandra ashley kimberly emily donna michelle dorothy carol amanda melissa deborah
stephanie rebecca sharon laura cynthia kathleen amy angela shirley anna brenda pamela emma
nicole helen samantha katherine christine rachel carolyn janet catherine maria heather diane
julie joyce victoria kelly christina joan evelyn lauren judith olivia martha cheryl megan andrea
hannah jacqueline ann jean alice kathryn gloria teresa sara janice doris madison julia grace""".split()
LAST_NAMES = """smith johnson williams brown jones garcia miller davis rodriguez martinez
hernandez lopez gonzalez wilson anderson thomas taylor moore jackson martin lee thompson white
harris sanchez clark ramirez lewis robinson walker young allen king wright scott torres nguyen
hill flores green adams nelson baker hall rivera campbell mitchell carter roberts gomez phillips
evans turner diaz parker cruz edwards collins reyes stewart morris morales murphy cook rogers
gutierrez ortiz morgan cooper peterson bailey reed kelly howard ramos kim cox ward richardson
watson brooks chavez wood james bennett gray mendoza ruiz hughes price alvarez castillo sanders
patel myers long ross foster jimenez""".split()
CITIES = """boston denver atlanta chicago dallas houston seattle portland phoenix miami
orlando tampa detroit philadelphia pittsburgh baltimore washington charlotte nashville memphis
louisville cincinnati cleveland columbus indianapolis milwaukee minneapolis omaha kansas
oklahoma austin albuquerque tucson sacramento oakland fresno honolulu anchorage richmond norfolk
raleigh savannah jacksonville buffalo rochester albany hartford providence newark toronto
montreal vancouver calgary london paris berlin madrid rome dublin amsterdam brussels vienna
zurich geneva frankfurt munich stockholm oslo copenhagen helsinki lisbon athens istanbul cairo
tokyo beijing shanghai seoul singapore bangkok sydney melbourne auckland mexico""".split()
MULTIWORD_CITIES = ["new york", "los angeles", "san francisco", "san diego", "las vegas",
                    "salt lake city", "new orleans", "saint louis", "san antonio", "hong kong"]
AIRLINES = ["united", "delta", "american", "southwest", "alaska", "continental", "lufthansa",
            "british airways", "air canada", "air france", "jet blue"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december"]
NATO = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra",
        "tango", "uniform", "victor", "whiskey", "x-ray", "yankee", "zulu"]


def _number_words() -> dict[str, list[str]]:
    """Rules for cardinals 1..999, ordinals 1..31, years, clock minutes, digit strings."""
    one_99 = list(ONES) + list(TEENS)
    for t in TENS:
        one_99 += [t] + [f"{t} {o}" for o in ONES]
    hundreds = [f"{o} hundred" for o in ONES]
    one_999 = list(one_99) + [(0.3, h) for h in hundreds] + \
        [(0.05, f"{h} [and] $NUM_1_99") for h in hundreds]
    ordinals = list(ORD_ONES) + list(ORD_TEENS) + ["twentieth", "thirtieth", "thirty first"] + \
        [f"twenty {o}" for o in ORD_ONES]
    minutes = ["oh " + o for o in ONES] + TEENS + TENS[:4] + \
        [f"{t} {o}" for t in TENS[:4] for o in ONES]
    return {
        "$DIGIT": [(0.5, "zero"), (0.5, "oh")] + ONES,
        "$NUM_1_99": one_99,
        "$NUM_1_999": one_999,
        "$ORDINAL_DAY": ordinals,
        "$MINUTE": minutes,
        "$HOUR": ONES + ["ten", "eleven", "twelve"],
        "$YEAR": ["twenty twenty $NUM_1_9", "twenty twenty", "two thousand [and] $NUM_1_9",
                  "nineteen $NUM_TENS_OR_PAIR"],
        "$NUM_1_9": ONES,
        "$NUM_TENS_OR_PAIR": [f"{t} {o}" for t in TENS[3:] for o in ONES] + TENS[3:],
    }


RULES: dict[str, list] = {
    "$S": [(3, "$FLIGHT"), (2, "$BANK"), (2, "$CALENDAR"), (1.5, "$CALL"), (1, "$WEATHER"),
           (1, "$HOTEL"), (1, "$CAR"), (1, "$TRAIN"), (1, "$RESTAURANT"), (1.5, "$DIGITS_TASK"),
           (1, "$ACCOUNT_INFO"), (1.5, "$COMMAND"), (1, "$CONFIRM"), (0.7, "$BOOKING_CODE"),
           (0.7, "$SUPPORT")],
    # --- politeness wrappers
    "$PLEASE_PRE": ["[please]", "could you [please]", "can you", "i would like you to",
                    "i need you to", "would you [please]"],
    "$WANT": ["i want to", "i would like to", "i need to", "i'd like to", "can i", "could i",
              "i'm trying to", "let me", "i wanna", "we want to", "we need to"],
    "$HELLO": ["hello", "hi", "good morning", "good afternoon", "good evening", "yes hello", "hey"],
    # --- flights
    "$FLIGHT": [
        "[$HELLO] $WANT $FLY from $CITY to $CITY [$WHEN]",
        "$WANT book a $TRIP_TYPE [ticket] from $CITY to $CITY [$WHEN]",
        "show me [all] [the] flights from $CITY to $CITY [$WHEN]",
        "are there any $CLASS flights to $CITY [$WHEN]",
        "what time does [the] $AIRLINE flight $NUM_1_999 (arrive in|leave) $CITY",
        "what time does flight $NUM_1_999 [from $CITY] (arrive|depart)",
        "i need a $TRIP_TYPE $CLASS ticket to $CITY [for $NPEOPLE]",
        "is flight $NUM_1_999 on time",
        "i'd like a [window|aisle] seat [please]",
        "$WANT change my flight to $TO_DAY [$PART_OF_DAY]",
        "$WANT cancel my (flight|reservation) [to $CITY] [$WHEN]",
        "[what is] the cheapest [$CLASS] fare from $CITY to $CITY",
        "i'm flying $AIRLINE [from $CITY] to $CITY $WHEN",
        "how much is a $TRIP_TYPE ticket to $CITY",
        "do you have anything [leaving] $WHEN",
        "list [all] [the] $AIRLINE flights [leaving|arriving] [$WHEN]",
        "which gate does flight $NUM_1_999 (leave from|arrive at)",
        "i have $NUM_1_9 [checked] bags",
    ],
    "$FLY": ["fly", "travel", "go", "get"],
    "$TRIP_TYPE": ["one way", "round trip", "return"],
    "$CLASS": ["economy", "business class", "first class", "nonstop", "direct", "morning",
               "evening", "red eye", "cheap"],
    "$AIRLINE": AIRLINES,
    "$NPEOPLE": ["one person", "$NUM_2_9 people", "$NUM_2_9 adults [and $NUM_1_9 children]",
                 "me and my wife", "my family", "two adults and a child"],
    "$NUM_2_9": ONES[1:],
    "$CITY": [(1, c) for c in CITIES] + [(1, c) for c in MULTIWORD_CITIES],
    # --- time and date expressions
    "$WHEN": ["$DAY_REF", "$DAY_REF $PART_OF_DAY", "on $DATE", "$DAY_REF at $TIME",
              "at $TIME", "on $DATE at $TIME", "$PART_OF_DAY", "next week", "this weekend",
              "as soon as possible", "$DAY_REF (around|before|after) $TIME"],
    "$DAY_REF": ["today", "tomorrow", "tonight", "on $WEEKDAY", "next $WEEKDAY", "this $WEEKDAY",
                 "the day after tomorrow", "on $WEEKDAY the $ORDINAL_DAY"],
    "$TO_DAY": ["tomorrow", "$WEEKDAY", "next $WEEKDAY", "the $ORDINAL_DAY", "$MONTH $ORDINAL_DAY",
                "next week", "the day after tomorrow"],
    "$PART_OF_DAY": ["in the morning", "in the afternoon", "in the evening", "at night",
                     "early", "late", "around noon", "around midnight"],
    "$DATE": ["$MONTH $ORDINAL_DAY", "the $ORDINAL_DAY [of $MONTH]", "$MONTH $ORDINAL_DAY $YEAR",
              "$WEEKDAY $MONTH $ORDINAL_DAY"],
    "$TIME": ["$HOUR o'clock", "$HOUR $MINUTE", "$HOUR [o'clock] $AM_PM", "$HOUR $MINUTE $AM_PM",
              "half past $HOUR", "quarter past $HOUR", "quarter to $HOUR", "noon", "midnight",
              "$NUM_1_99 minutes past $HOUR"],
    "$AM_PM": ["in the morning", "in the afternoon", "in the evening", "at night", "p m"],
    "$WEEKDAY": WEEKDAYS,
    "$MONTH": MONTHS,
    # --- banking
    "$BANK": [
        "$WANT transfer $AMOUNT from [my] $ACCOUNT to [my] $ACCOUNT",
        "what is [the balance of] my $ACCOUNT [balance]",
        "what's my $ACCOUNT balance",
        "pay my $BILL [bill] [$WHEN]",
        "$WANT pay $AMOUNT [to $PERSON] [$WHEN]",
        "send $AMOUNT to $PERSON",
        "how much did i spend [on $SPEND] [last month|this week|yesterday]",
        "$WANT report a lost (credit|debit) card",
        "$WANT dispute a charge of $AMOUNT",
        "[please] deposit $AMOUNT (into|in) my $ACCOUNT",
        "show me [my] [recent|last] [$NUM_2_9] transactions",
        "when is my $BILL [bill] due",
        "$WANT open a new $ACCOUNT",
        "what is the interest rate on [my|a] $ACCOUNT",
    ],
    "$AMOUNT": ["$NUM_1_999 dollars", "$NUM_1_999 dollars and $NUM_1_99 cents",
                "$NUM_1_99 thousand dollars", "$NUM_1_9 thousand $NUM_1_9 hundred dollars",
                "$NUM_1_99 cents", "a hundred dollars", "fifty bucks"],
    "$ACCOUNT": ["checking [account]", "savings [account]", "credit card [account]",
                 "business account", "joint account", "retirement account", "money market account"],
    "$BILL": ["phone", "electric", "gas", "water", "cable", "internet", "credit card", "mortgage",
              "rent", "insurance", "car"],
    "$SPEND": ["groceries", "restaurants", "gas", "travel", "clothes", "coffee", "shopping"],
    # --- calendar
    "$CALENDAR": [
        "$PLEASE_PRE schedule a $MEETING with $PERSON $WHEN",
        "$PLEASE_PRE set up a $MEETING [with $PERSON] [$WHEN]",
        "remind me to $ERRAND $WHEN",
        "[please] remind me $WHEN to $ERRAND",
        "what do i have [on my calendar] $DAY_REF",
        "am i free $WHEN",
        "move my $MEETING [with $PERSON] to $TO_DAY [at $TIME]",
        "cancel my $MEETING [with $PERSON] [$DAY_REF]",
        "when is my next $MEETING",
        "set an alarm for $TIME",
        "wake me up at $TIME [$DAY_REF]",
        "add $PERSON to the $MEETING [$DAY_REF]",
        "how long is the $MEETING $DAY_REF",
    ],
    "$MEETING": ["meeting", "appointment", "call", "lunch", "dinner", "conference call",
                 "doctor's appointment", "dentist appointment", "interview", "review", "party"],
    "$ERRAND": ["call $PERSON", "call my mother", "buy milk", "pay the rent", "pick up the kids",
              "send the report", "book a table", "water the plants", "take my medicine",
              "check the mail", "renew my passport", "email $PERSON", "pick up $PERSON at the airport"],
    "$PERSON": ["$FIRST", "$FIRST $LAST", "mister $LAST", "missus $LAST", "doctor $LAST",
                "my wife", "my husband", "my boss", "my sister", "my brother", "my mother",
                "my father", "the manager"],
    "$FIRST": FIRST_NAMES,
    "$LAST": LAST_NAMES,
    # --- calls and digits
    "$CALL": [
        "call $PERSON [at home|at work|on his cell|on her cell]",
        "[please] dial $PHONE",
        "call $PHONE",
        "my [phone] number is $PHONE",
        "you can reach me at $PHONE",
        "[please] connect me to $PERSON",
        "transfer me to [the] $DEPARTMENT [department|please]",
        "i'd like to speak to $PERSON",
        "redial [the last number]",
        "[please] send a text [message] to $PERSON [saying $SHORT_MSG]",
        "read my [new] messages",
    ],
    "$SHORT_MSG": ["i'm running late", "call me back", "see you soon", "i'm on my way",
                   "happy birthday", "thank you", "i'll be there at $TIME"],
    "$DEPARTMENT": ["billing", "sales", "customer service", "technical support", "accounting",
                    "reservations", "operator", "shipping", "returns", "human resources"],
    "$PHONE": ["$DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT",
               "$DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT",
               "area code $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT",
               "extension $DIGIT $DIGIT $DIGIT $DIGIT",
               "one eight hundred $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT"],
    "$DIGITS_TASK": [
        "my account number is $DIGITS",
        "my pin is $DIGIT $DIGIT $DIGIT $DIGIT",
        "the [confirmation] code is $DIGITS",
        "$DIGITS",
        "my zip code is $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT",
        "my card number ends in $DIGIT $DIGIT $DIGIT $DIGIT",
        "my date of birth is $MONTH $ORDINAL_DAY nineteen $NUM_TENS_OR_PAIR",
        "my member number is $DIGITS",
        "it's $DIGITS",
        "the last four digits are $DIGIT $DIGIT $DIGIT $DIGIT",
    ],
    "$DIGITS": ["$DIGIT $DIGIT $DIGIT", "$DIGIT $DIGIT $DIGIT $DIGIT",
                "$DIGIT $DIGIT $DIGIT $DIGIT $DIGIT", "$DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT",
                "$DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT $DIGIT",
                "$DIGIT $DIGIT double $DIGIT $DIGIT", "triple $DIGIT $DIGIT $DIGIT"],
    "$BOOKING_CODE": [
        "my confirmation code is $NATO $NATO $DIGIT $DIGIT $NATO",
        "the booking reference is $NATO $NATO $NATO $DIGIT $DIGIT $DIGIT",
        "that's $NATO as in $NATO",
        "my last name is $LAST [spelled $NATO $NATO $NATO]",
        "it's $NATO $DIGIT $DIGIT $NATO $NATO",
    ],
    "$NATO": NATO,
    "$ACCOUNT_INFO": [
        "my name is $FIRST $LAST",
        "this is $FIRST [$LAST] [calling]",
        "i live in $CITY",
        "my address is $NUM_1_999 $STREET $STREET_TYPE",
        "[i'm calling] from $CITY",
        "i was born on $MONTH $ORDINAL_DAY",
        "my email is $FIRST dot $LAST at $DOMAIN dot com",
    ],
    "$STREET": ["main", "oak", "maple", "pine", "cedar", "elm", "washington", "lake", "hill",
                "park", "church", "river", "sunset", "highland", "lincoln", "jefferson", "first",
                "second", "third", "madison", "franklin", "spring", "ridge", "forest", "willow"],
    "$STREET_TYPE": ["street", "avenue", "road", "drive", "lane", "boulevard", "court", "way", "place"],
    "$DOMAIN": ["gmail", "yahoo", "hotmail", "outlook", "$LAST"],
    # --- weather
    "$WEATHER": [
        "what's the weather [like] [in $CITY] [$DAY_REF]",
        "what is the weather [going to be] [like] in $CITY $DAY_REF",
        "will it (rain|snow) in $CITY $DAY_REF",
        "is it going to be (cold|hot|windy|sunny|cloudy) $DAY_REF",
        "what's the temperature [in $CITY] [right now]",
        "do i need an umbrella [$DAY_REF]",
        "how (hot|cold) will it be [in $CITY] $DAY_REF",
        "give me the forecast for $CITY [for the weekend|for next week]",
    ],
    # --- hotel, car, train, restaurant
    "$HOTEL": [
        "$WANT book a $ROOM [in $CITY] [for $NUM_1_9 nights] [starting $DAY_REF]",
        "do you have a $ROOM available $DAY_REF",
        "i need a hotel [room] in $CITY [near the airport|downtown|near the beach] [$WHEN]",
        "what time is check (in|out)",
        "$WANT check out [late] [$DAY_REF]",
        "can i get a room with a (view|balcony|kitchen)",
        "is breakfast included",
        "how much is a $ROOM per night",
    ],
    "$ROOM": ["single room", "double room", "king room", "suite", "room for two", "quiet room",
              "non smoking room", "room with two beds"],
    "$CAR": [
        "$WANT rent a $CAR_TYPE [in $CITY] [$WHEN]",
        "i need a $CAR_TYPE [from $DAY_REF] [until $WEEKDAY]",
        "can i pick up the car at the $CITY airport",
        "$WANT return the car [in $CITY] [$WHEN]",
        "does the car come with (insurance|a g p s|unlimited miles)",
    ],
    "$CAR_TYPE": ["car", "compact car", "small car", "mid size car", "full size car", "minivan",
                  "convertible", "pickup truck", "sports car", "van", "s u v"],
    "$TRAIN": [
        "when does the next train to $CITY leave",
        "$WANT buy a $TRIP_TYPE train ticket to $CITY",
        "which platform does the $TIME train [to $CITY] leave from",
        "is the train to $CITY delayed",
        "how long is the train ride from $CITY to $CITY",
        "$WANT take the bus to $CITY [$WHEN]",
    ],
    "$RESTAURANT": [
        "$WANT book a table for $NUM_2_9 [people] [$WHEN]",
        "$WANT make a reservation for $NUM_2_9 [at $TIME] [$DAY_REF]",
        "find me a [good|cheap|nearby] $CUISINE restaurant [in $CITY]",
        "is there a $CUISINE place [near me|nearby|downtown] [that is open now]",
        "what time does the restaurant (open|close) $DAY_REF",
        "i'd like to order a $FOOD [and a $FOOD]",
    ],
    "$CUISINE": ["italian", "chinese", "mexican", "thai", "indian", "japanese", "french", "greek",
                 "korean", "vietnamese", "seafood", "vegetarian", "steak", "pizza", "sushi"],
    "$FOOD": ["pizza", "salad", "burger", "sandwich", "coffee", "tea", "soup", "steak", "pasta",
              "chicken sandwich", "large coffee", "glass of water", "cheeseburger"],
    # --- dialogue control
    "$COMMAND": ["yes", "no", "yes please", "no thank you", "cancel", "repeat that",
                 "say that again", "go back", "start over", "help", "operator", "main menu",
                 "stop", "next", "previous", "that's correct", "that's wrong", "i don't know",
                 "agent", "representative", "speak to a person", "never mind", "goodbye",
                 "thank you", "thanks", "okay", "sure", "exactly", "wait", "hold on",
                 "one moment please", "skip this", "none of the above", "all of them",
                 "the first one", "the second one", "the last one", "neither",
                 "[please] $LOUDNESS", "[please] talk [more] [slowly]"],
    "$LOUDNESS": ["speak up", "louder", "quieter"],
    "$CONFIRM": ["[yes] that's right", "no i said $CITY", "no i said $WEEKDAY",
                 "[no] [i said] $DIGITS", "no [not $CITY] $CITY", "yes [the] $ORDINAL_DAY",
                 "correct", "[yes] $TIME is fine", "[no] make it $NUM_2_9 [people]",
                 "[actually] change that to $WEEKDAY", "no [the] $MONTH $ORDINAL_DAY"],
    "$SUPPORT": [
        "my $DEVICE (isn't|is not) working",
        "i can't (log in|sign in) to my account",
        "$WANT reset my password",
        "my internet (is down|keeps dropping|is slow)",
        "i never received my (order|package|refund|card)",
        "where is my (order|package)",
        "$WANT return $RETURN_ITEM",
        "$WANT (upgrade|cancel|change) my (plan|subscription|service)",
        "i was charged twice",
    ],
    "$RETURN_ITEM": ["an item", "my order", "these shoes", "a jacket", "the printer"],
    "$DEVICE": ["phone", "computer", "laptop", "printer", "router", "television", "modem", "tablet"],
}
RULES.update(_number_words())

_TOKEN = re.compile(r"\[[^\]]*\]|\([^)]*\)|\S+")


def _parse_alt(alt: str) -> list:
    """Tokenise an alternative: words, $NT, and [a|b c] optional groups (nested not allowed)."""
    out = []
    for tok in _TOKEN.findall(alt):
        if tok[0] in "[(":
            choices = [c.split() for c in tok[1:-1].split("|")]
            out.append(("opt" if tok[0] == "[" else "req", choices))
        else:
            out.append(tok)
    for tok in out:
        words = [tok] if isinstance(tok, str) else [t for c in tok[1] for t in c]
        if any(not w or set(w) & set("[]()|") for w in words) or \
                (not isinstance(tok, str) and any(not c for c in tok[1])):
            raise ValueError(f"grammar: bad alternative (nested or unbalanced brackets?): '{alt}'")
    return out


@lru_cache(maxsize=None)
def _compiled() -> dict[str, tuple[list[list], np.ndarray]]:
    comp = {}
    for nt, alts in RULES.items():
        parsed, weights = [], []
        for a in alts:
            w, s = (a if isinstance(a, tuple) else (1.0, a))
            parsed.append(_parse_alt(s))
            weights.append(float(w))
        wa = np.asarray(weights)
        comp[nt] = (parsed, wa / wa.sum())
    for nt, (parsed, _) in comp.items():
        for alt in parsed:
            for tok in alt:
                toks = [tok] if isinstance(tok, str) else [t for c in tok[1] for t in c]
                for t in toks:
                    if t.startswith("$") and t not in comp:
                        raise KeyError(f"grammar rule {nt} uses undefined {t}")
    return comp


def _expand(sym: str, rng: np.random.Generator, out: list[str], depth: int = 0) -> None:
    if not sym.startswith("$"):
        out.append(sym)
        return
    if depth > 30:
        raise RecursionError(f"grammar too deep at {sym}")
    parsed, probs = _compiled()[sym]
    alt = parsed[rng.choice(len(parsed), p=probs)]
    for tok in alt:
        if isinstance(tok, str):
            _expand(tok, rng, out, depth + 1)
        elif tok[0] == "req" or rng.random() < 0.5:  # optional groups: half of the time
            choices = tok[1]
            for t in choices[rng.integers(len(choices))]:
                _expand(t, rng, out, depth + 1)


def sample_sentence(rng: np.random.Generator, start: str = "$S") -> str:
    """One sentence (space-separated lower-case words) drawn from the grammar."""
    out: list[str] = []
    _expand(start, rng, out)
    return " ".join(out)


@lru_cache(maxsize=None)
def vocabulary() -> frozenset[str]:
    """Every word the grammar can produce."""
    words = set()
    for parsed, _ in _compiled().values():
        for alt in parsed:
            for tok in alt:
                toks = [tok] if isinstance(tok, str) else [t for c in tok[1] for t in c]
                words.update(t for t in toks if not t.startswith("$"))
    return frozenset(words)
