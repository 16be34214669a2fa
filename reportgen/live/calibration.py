"""Calibration texts for views.live's error-compensating rounding (reportgen/live/weights.py
`gptq_codes`): what a layer's inputs look like, so that each rounding error is spread onto the weights that the
inputs make matter least.

Ordinary English written for reportgen: short queries and sentences, sentence pairs (a cross-encoder's input), and
one paragraph of about 400 tokens, which matters most (long inputs have the sharpest attention). They are not the
texts the tests check the page's accuracy on (tests/live/test_live_model.py).
"""

from __future__ import annotations

SENTENCES = (
    'A small grey heron stood still at the edge of the pond.',
    'Where can I buy cheap flights to Tokyo in March?',
    'She said the report would be ready by Friday, but it was late.',
    'How do I bake sourdough bread at home',
    'Stock markets fell sharply after the announcement of new tariffs.',
    'best running shoes for flat feet',
    "The committee approved the budget for next year's school renovations.",
    'python list comprehension with if else',
    'A man is playing a guitar on the street.',
    'Two dogs are running through a field of snow.',
    'The museum will reopen to visitors after a two-year restoration.',
    'Can you recommend a good book about ancient Rome?',
    'Heavy rain caused flooding in several low-lying neighbourhoods overnight.',
    'what is the tallest mountain in africa',
    'My grandmother grows tomatoes, beans and squash in her backyard garden.',
    'The train was delayed by forty minutes because of a signal fault.',
    'Researchers found that regular exercise improves sleep quality in older adults.',
    'how to reset a forgotten wifi password',
    "The orchestra performed Beethoven's ninth symphony to a sold-out hall.",
    'A woman is slicing onions in a small kitchen.',
    'Children were flying kites on the beach in the afternoon wind.',
    'The new phone has a larger battery and a brighter screen.',
    'He apologised for the mistake and promised to fix it immediately.',
    'cheap hotels near the city centre with free parking',
    'The river freezes every winter, and people skate on it for weeks.',
    'Our team won the regional championship after a penalty shootout.',
    'The doctor advised him to drink more water and rest for a few days.',
    'Why is the sky blue during the day and red at sunset?',
    'A cat is sleeping on a warm windowsill.',
    'The company reported a small profit despite rising energy costs.',
    'Volunteers planted three hundred trees along the old railway line.',
    'Please send me the invoice by email before the end of the month.',
)

PAIRS = (
    ('A man is playing a guitar on the street.', 'Someone is performing music outdoors.'),
    ('Two dogs are running through a field of snow.', 'A cat is sleeping on a sofa.'),
    ('How do I bake sourdough bread at home', 'Simple steps for making bread with a starter.'),
    ('The train was delayed by forty minutes.', 'The train arrived late because of a fault.'),
    ('The company reported a small profit.', 'Heavy rain caused flooding overnight.'),
    ('which river flows through vienna', 'The Danube passes through Vienna on its way to the Black Sea.'),
    ('Children were flying kites on the beach.', 'Kids played with kites by the sea.'),
    ('The orchestra performed a symphony.', 'The stock market fell sharply.'),
)

PARAGRAPH = (
    'The small coastal town had changed very little in a hundred years. Fishing boats still left the harbour '
    'before dawn, and by mid-morning the market square was crowded with stalls selling bread, cheese, '
    "vegetables and the day's catch. Visitors who arrived in summer often remarked on how quiet the evenings "
    'were: once the sun went down, the only sounds were the waves against the sea wall and the occasional '
    'bell from the church on the hill. In recent years, however, the town council had begun to worry about '
    'the future. Young people were moving to the cities in search of work, the old cannery had closed, and '
    'several shops on the main street stood empty. A local historian suggested that the town could attract '
    'more visitors by restoring the lighthouse and opening a small museum about the fishing industry. The '
    'proposal was debated for months. Some residents feared that more tourism would raise house prices and '
    'spoil the character of the place, while others argued that without new income the town would slowly '
    'disappear. In the end, a compromise was reached: the lighthouse would be repaired with money from a '
    'regional heritage fund, the museum would be run by volunteers, and the council would limit the number of'
    ' holiday rentals in the old quarter. The work took nearly three years. Engineers replaced the rusted '
    'iron stairs, electricians installed a modern lamp that still looked like the original, and a team of '
    'painters restored the red and white stripes on the tower. When the museum finally opened, it displayed '
    'old nets, photographs, logbooks and a wooden rowing boat built by the grandfather of one of the '
    'volunteers. On the first weekend more than two thousand people came, many of them former residents who '
    'had moved away decades earlier. They walked along the harbour, bought ice cream, told stories about '
    'their childhood and promised to return the following summer. Whether the plan will succeed in the long '
    'run is still uncertain, but for now the town feels more hopeful than it has for a long time, and the '
    'lights of the tower shine again across the bay.'
)


def calibration_inputs(tokenizer, max_length: int = 512) -> list[dict]:
    """The texts as the model's inputs (torch tensors, batch of one each)."""
    texts = [(sentence, None) for sentence in SENTENCES] + list(PAIRS) + [(PARAGRAPH, None)]
    return [dict(tokenizer(first, second, truncation=True, max_length=max_length, return_tensors="pt"))
            for first, second in texts]
