"""The job flags shared by `ddm sample --local` and `ddm submit`: the order of the images they ask for,
and a help text that says that order."""

from __future__ import annotations

import argparse

import pytest

from ddm.ops.cli.job_flags import add_job_arguments, job_labels
from ddm.schema.errors import ConfigError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_job_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "labels", "cols"),
    [
        # the whole list is repeated --n times: row by row, one grid column per label
        (("--labels", "3,8", "--n", "2"), [3, 8, 3, 8], 2),
        (("--labels", "0,3,7", "--n", "1"), [0, 3, 7], 3),
        (("--labels", "5"), [5] * 8, 8),
        (("--all-labels", "--n", "2"), [*range(10), *range(10)], 10),
        (("--label", "4", "--n", "3"), [4, 4, 4], 3),
        ((), [3] * 8, 8),
    ],
)
def test_labels_are_the_list_repeated_n_times(argv, labels, cols):
    assert job_labels(parse(*argv)) == (labels, cols)


def test_the_help_text_says_that_order():
    parser = argparse.ArgumentParser()
    add_job_arguments(parser)
    helps = {a.dest: a.help for a in parser._actions}
    assert "--labels 3,8 --n 2 gives 3,8,3,8" in helps["labels"]
    assert job_labels(parse("--labels", "3,8", "--n", "2"))[0] == [3, 8, 3, 8]  # what the example claims
    assert "whole list repeated --n times" in helps["all_labels"]


@pytest.mark.parametrize("argv", [("--labels", "3,x"), ("--labels", "3", "--n", "0")])
def test_bad_labels_or_n_are_config_errors(argv):
    with pytest.raises(ConfigError, match="expected"):
        job_labels(parse(*argv))


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--n", "100000"), "got --n 100000 x 1 label = 100000 images"),
        (("--all-labels", "--n", "7"), "got --n 7 x 10 labels = 70 images"),
    ],
)
def test_too_many_images_say_what_is_wrong_with_n(argv, said):
    """It used to say "expected 1..64 labels": a count of labels the user never typed."""
    with pytest.raises(ConfigError) as err:
        job_labels(parse(*argv))
    assert str(err.value).startswith("expected at most 64 images in one job (--n times the labels), ")
    assert said in str(err.value)
    assert job_labels(parse("--all-labels", "--n", "6"))[0] == list(range(10)) * 6  # 60: fits


def test_the_help_says_what_a_bare_command_asks_for():
    parser = argparse.ArgumentParser()
    add_job_arguments(parser)
    helps = {a.dest: a.help for a in parser._actions}
    assert "a bare command asks for 8 images of label 3" in helps["label"]
    assert job_labels(parse()) == ([3] * 8, 8)


def test_label_takes_a_class_name_and_a_bad_item_is_named():
    """`--label boot` failed with argparse's int error while --labels took names; and in `--labels
    flags,smileys` the bad item was not named (issue 40 part 4)."""
    from ddm.schema.sample_space import SampleSpace

    groups = SampleSpace((3, 32, 32), (-1.0, 1.0), 3, ("Smileys", "Flags", "Animals"))
    assert job_labels(parse("--label", "flags", "--n", "2"), groups) == ([1, 1], 2)
    with pytest.raises(ConfigError, match=r"--labels items .* got 'smilies'"):
        job_labels(parse("--labels", "flags,smilies"), groups)
    with pytest.raises(ConfigError, match=r"--label items .*\(Smileys, Flags, Animals\), got 'boot'"):
        job_labels(parse("--label", "boot"), groups)


def test_a_label_equal_to_the_class_count_is_refused_not_taken_as_unconditional():
    """`--labels 10` on Fashion-MNIST made unconditional images and exited 0 (issue 40 part 3): only the
    word null asks for one."""
    with pytest.raises(ConfigError, match=r"got 10: 10 is past the last class; write null"):
        job_labels(parse("--labels", "3,10"))
    with pytest.raises(ConfigError, match="write null"):
        job_labels(parse("--label", "10"))
    assert job_labels(parse("--labels", "3,null", "--n", "1"))[0] == [3, None]
