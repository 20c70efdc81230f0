"""Reads Kadence topics with stock Confluent tooling: confluent-kafka's AvroDeserializer
pointed at a scheduler's schema registry endpoint (`http://<node>/registry`), as any
registry-aware consumer would. Prints one JSON line per record: the topic, the schema id of
its frame and the decoded record.

    python3 decode_with_registry.py --brokers HOST:PORT --registry URL TOPIC [TOPIC ...]

Reads each topic from the beginning until it has been quiet for --quiet seconds (a broker's
high watermark can trail just-acknowledged records, so "the end" is when nothing more comes),
at most --give-up-after seconds. Exits non-zero if a record cannot be decoded.
"""

import argparse
import json
import struct
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--quiet", type=float, default=3.0)
    parser.add_argument("--give-up-after", type=float, default=60.0)
    parser.add_argument("topics", nargs="+")
    args = parser.parse_args()

    registry = SchemaRegistryClient({"url": args.registry})
    deserializer = AvroDeserializer(registry)
    consumer = Consumer(
        {
            "bootstrap.servers": args.brokers,
            "group.id": f"registry-decode-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(args.topics)
    started = last_record = time.monotonic()
    try:
        while time.monotonic() - last_record < args.quiet:
            if time.monotonic() - started > args.give_up_after:
                print(f"the topics never went quiet for {args.quiet} s", file=sys.stderr)
                return 1
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            last_record = time.monotonic()
            value = message.value()
            (schema_id,) = struct.unpack(">I", value[1:5])
            context = SerializationContext(message.topic(), MessageField.VALUE)
            record = deserializer(value, context)
            line = {"topic": message.topic(), "schema_id": schema_id, "record": record}
            print(json.dumps(line, default=repr), flush=True)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
