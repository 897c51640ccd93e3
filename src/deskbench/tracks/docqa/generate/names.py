"""Word pools for the seeded world. Tuples, so iteration order never depends on hashing."""

from __future__ import annotations

TOWNS = (
    "Riverton", "Ashford", "Millbrook", "Kestrel Bay", "Oakdale", "Fernhill", "Granite Falls",
    "Larkspur", "Marlow", "Northgate", "Pinecrest", "Quarry Hill", "Redwater", "Stonebridge",
    "Thornbury", "Upton", "Valemont", "Westbrook", "Willowmere", "Yarrow", "Brackenridge",
    "Cedar Point", "Dunmore", "Elmstead", "Foxley", "Glenhaven", "Hollins", "Ironwood",
    "Juniper Creek", "Kingsmere", "Lowmoor", "Maplewood", "Newhaven", "Orchard Hill",
    "Pebble Cove", "Ravensworth", "Silverdale", "Tidewater", "Wrenfield", "Bramble Ford",
)
ORG_KINDS = ("Town Council", "Water Authority", "Library Trust", "Transit District", "Parks Board",
             "Housing Agency", "Hospital Foundation", "School District")
FIRST = ("Marta", "Jonas", "Priya", "Tomasz", "Aisha", "Henrik", "Lucia", "Dmitri", "Keiko", "Owen",
         "Ines", "Rafael", "Greta", "Samir", "Nadia", "Colm", "Beatriz", "Anders", "Yusuf", "Elena",
         "Felix", "Hana", "Idris", "Johanna", "Kofi", "Leona", "Mateo", "Noor", "Oskar", "Ruth")
LAST = ("Okafor", "Lindqvist", "Alvarez", "Brennan", "Castellano", "Duarte", "Eriksen", "Fairbairn",
        "Gallagher", "Haddad", "Ivanova", "Jorgensen", "Kowalczyk", "Larsen", "Moreau", "Nakamura",
        "Ostrowski", "Petrakis", "Quintero", "Rasmussen", "Szabo", "Takahashi", "Umeh", "Varga",
        "Whitfield", "Yilmaz", "Zielinski", "Abernathy", "Bjornsen", "Carvalho")
REVENUES = ("Property tax", "State grants", "Fees and charges", "Investment income", "Rental income")
DEPARTMENTS = ("Public works", "Parks and recreation", "Library services", "Administration",
               "Planning", "Community safety")
PROJECTS = ("Library renovation", "Bridge repair", "Storm drain upgrade", "Playground rebuild",
            "Depot roof replacement", "Street lighting", "Pool refurbishment", "Trail extension")
SUPPLIERS = ("Northwind Paving", "Bluestone Electrical", "Harrow & Pike Legal", "Clearwater Pumps",
             "Summit Office Supply", "Granger Fleet Services", "Kiln Street Printing",
             "Meridian IT Consulting", "Oakhurst Landscaping", "Pioneer Fuel Co.", "Redline Security",
             "Tallis Engineering", "Vantage Insurance", "Wexford Catering", "Ambrose Uniforms",
             "Cobalt Waste Removal", "Delta Signage", "Evergreen Tree Care")
RESTAURANT_A = ("Harbor", "Copper", "Olive", "Juniper", "Saffron", "Lantern", "Birch", "Fig",
                "Marigold", "Anchor", "Ember", "Thistle", "Pepper", "Salt", "Hazel", "Cobble")
RESTAURANT_B = ("Bistro", "Kitchen", "Table", "Tavern", "Grill", "Brasserie", "Diner", "Cantina",
                "Eatery", "Trattoria")
MAINS = (("Cedar-plank salmon", "with fennel and lemon"), ("Wild mushroom risotto", "arborio, parmesan"),
         ("Harbor chowder", "clams, potato, bacon"), ("Braised short rib", "red wine, root mash"),
         ("Roast half chicken", "garlic jus, greens"), ("Lentil moussaka", "aubergine, bechamel"),
         ("Steak frites", "sirloin, peppercorn sauce"), ("Fish tacos", "cod, slaw, lime"),
         ("Lamb tagine", "apricot, couscous"), ("Spinach gnocchi", "sage butter"),
         ("Pork schnitzel", "lemon, caper salad"), ("Shrimp linguine", "chilli, garlic"))
DESSERTS = (("Lemon tart", "creme fraiche"), ("Sticky toffee pudding", "vanilla ice cream"),
            ("Chocolate torte", "raspberry coulis"), ("Apple crumble", "custard"),
            ("Panna cotta", "poached rhubarb"), ("Cheese plate", "three local cheeses"),
            ("Affogato", "espresso, gelato"), ("Pear galette", "almond cream"))
VIOLATIONS = ("Food held at unsafe temperature", "Evidence of pest activity",
              "Handwashing station not stocked", "Raw and cooked foods stored together",
              "Expired products on shelves")
WORK_TYPES = ("New construction", "Alteration", "Addition", "Demolition")
WORKS = ("Rear extension, single storey", "Detached garage", "Loft conversion", "Two-storey dwelling",
         "Shop front replacement", "Basement underpinning", "Deck and pergola", "Barn conversion")
STREETS = ("Mill Lane", "Harbour Road", "Station Street", "Church Walk", "Elm Avenue", "Quarry Road",
           "Kings Parade", "Meadow Close", "Bridge Street", "Orchard Row", "Castle Hill", "Ferry Lane")
CONTRACTORS = ("Brightwell Builders", "Coastline Construction", "Dovetail Joinery", "Eastfield Masonry",
               "Foundry Row Contractors", "Greystone Homes", "Hartley & Sons", "Ironbark Framing",
               "Keystone Renovations", "Lodestar Building", "Mason Reid Ltd", "Northstar Roofing",
               "Parkway Developments", "Quayside Builders", "Ridgeback Construction", "Stanmore Works")
TRADES = ("General builder", "Roofing", "Masonry", "Carpentry", "Demolition")
ITEMS = (("Printer toner cartridges", 89), ("Office chairs", 240), ("Safety boots", 75),
         ("Hi-vis jackets", 32), ("Road salt (tonne)", 118), ("Laptop docking stations", 165),
         ("Traffic cones", 14), ("First aid kits", 46), ("LED floodlights", 210),
         ("Paper reams (box)", 38), ("Hand sanitiser (case)", 27), ("Garden mulch (m3)", 55),
         ("Filing cabinets", 310), ("Extension ladders", 185))
CLIENTS = ("Riverton Town Council", "Ashford Water Authority", "Millbrook Library Trust",
           "Oakdale School District", "Fernhill Parks Board")
CATEGORIES = ("Infrastructure", "Safety", "Education", "Planning")
LEVELS = (("green", "High (80-100)", "High"), ("amber", "Medium (50-79)", "Medium"),
          ("red", "Low (0-49)", "Low"))
REGIONS = ("Northern", "Coastal", "Midland", "Highland", "Southern", "Valley")
PARKS = ("Elm Park", "Mill Green", "Heron Meadow", "Castle Fields", "Beacon Common", "Kiln Park",
         "Otter Reach", "Lark Rise Gardens", "Foundry Square", "Willow Bank")
CLUBS = ("rowing club", "allotment society", "chess club", "film society", "choir",
         "cycling club", "history society", "walking group")
EVENTS = ("spring fair", "harvest festival", "charity fun run", "lantern parade", "book sale",
          "open studios weekend", "farmers market", "summer concert")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
FILLER = (
    "Residents are reminded that the recycling collection moves to Thursdays from next month.",
    "The council thanks everyone who responded to the consultation on the draft town plan.",
    "Road works on the ring road are expected to continue through the summer.",
    "The library now offers extended opening on Wednesday evenings.",
    "Volunteers are needed for the litter pick along the river path.",
    "The youth football league has opened registration for the new season.",
    "New bus timetables are available at the information desk.",
    "The community hall kitchen has been refurbished with support from local businesses.",
)
