"""ops/eval/router_data.py: which samples a new router is scored on, and that the report says why."""

from __future__ import annotations

from ddm.ops.data.partitions import partition_kmeans, partition_random
from ddm.ops.eval.router_data import router_eval_set
from tests.support.fakes import synthetic


def test_without_a_held_out_split_the_training_sample_says_why():
    ds = synthetic()  # split "test": nothing of it is held out
    kmeans = router_eval_set(partition_kmeans(ds, 2, fine=16, seed=0, dims=8), ds)
    assert kmeans.where == "200 training samples (mnist has no split held out from 'test')"
    shards = router_eval_set(partition_random(ds, 2, seed=0), ds)
    assert shards.where == "200 training samples (random shards have no rule for new samples)"
    assert (kmeans.clusters < 2).all() and len(kmeans.images) == len(kmeans.labels) == 200
