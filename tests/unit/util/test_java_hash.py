"""Java String.hashCode vectors and Kafka's partitionFor."""
from broker.util.java_hash import java_string_hash_code, kafka_abs, partition_for


def test_java_hash_code_vectors() -> None:
    assert java_string_hash_code("") == 0
    assert java_string_hash_code("a") == 97
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("Aa") == java_string_hash_code("BB") == 2112
    assert java_string_hash_code("Hello World") == -862545276          # int32 overflow, negative
    assert java_string_hash_code("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert java_string_hash_code("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair
    assert java_string_hash_code("é") == 233


def test_kafka_abs_and_partition_for() -> None:
    assert kafka_abs(-2147483648) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("Hello World", 50) == 862545276 % 50
    assert partition_for("hello", 7) == 99162322 % 7
