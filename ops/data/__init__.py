"""Datasets (IDX files, the known datasets, splits, download, loading) and partitions (--by specs,
label groups, k-means, random shards, previews). The manifest record itself is ddm.schema.partition."""
