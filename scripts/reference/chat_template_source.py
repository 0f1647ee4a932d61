"""The chat template the seed's processor would use for a model folder: transformers 5.17's own resolution
(ProcessorMixin.get_processor_dict, which AutoProcessor.from_pretrained calls), read by
test/train-collate.test.ts to check src/train/chat-template.ts's order of sources.

Prints a JSON list, one {"chat_template": <the template text, or null where the processor would have none>} a DIR.
Usage: python chat_template_source.py DIR [DIR ...]
"""
import json
import sys

from transformers.processing_utils import ProcessorMixin


def main() -> None:
    found = [ProcessorMixin.get_processor_dict(folder)[0].get("chat_template") for folder in sys.argv[1:]]
    print(json.dumps([{"chat_template": template} for template in found]))


if __name__ == "__main__":
    main()
