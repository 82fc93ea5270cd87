"""Values the tests share."""

# Batch buckets small enough that every worker a test starts compiles (JAX) and warms up quickly.
TEST_BUCKETS = (1, 2, 4, 8, 16, 32)
