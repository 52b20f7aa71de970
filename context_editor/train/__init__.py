"""Training (a face): `context-editor train ner` builds the small NER model domains opt into.

It may import anything below it (domain kinds, the NER model's card format); nothing below imports it.
"""
