#!/usr/bin/python3
"""Parse a Prometheus text exposition with the reference parser
(python3-prometheus-client) and print it as one JSON object:
{"families": {name: type}, "samples": [[name, {labels}, value], ...]}.
Exit 1 with the parser's message when the text does not parse."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

try:
    text = open(sys.argv[1]).read()
    families, samples = {}, []
    for fam in text_string_to_metric_families(text):
        families[fam.name] = fam.type
        for s in fam.samples:
            samples.append([s.name, s.labels, s.value])
except Exception as e:  # the parser raises ValueError and friends on bad input
    print("prometheus parser refused the text: %r" % (e,), file=sys.stderr)
    sys.exit(1)
print(json.dumps({"families": families, "samples": samples}))
