"""ddm.schema.flow: the one flow convention, with known answers (fields whose flow is solved by hand)."""

import numpy as np
import pytest

from ddm.schema.flow import (
    IMAGE_SHAPE,
    NULL_CLASS,
    NUM_CLASSES,
    euler_step,
    guided_velocity,
    interpolate,
    pad_to_32,
    target_velocity,
    time_grid,
    to_uint8,
)


@pytest.fixture
def pair():
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((3, *IMAGE_SHAPE)).astype(np.float32)
    x1 = rng.uniform(-1, 1, (3, *IMAGE_SHAPE)).astype(np.float32)
    return x0, x1


def test_constants():
    assert NUM_CLASSES == 10
    assert NULL_CLASS == 10
    assert IMAGE_SHAPE == (1, 32, 32)


def test_interpolate_endpoints(pair):
    x0, x1 = pair
    np.testing.assert_array_equal(interpolate(x0, x1, np.zeros(3, np.float32)), x0)
    np.testing.assert_array_equal(interpolate(x0, x1, np.ones(3, np.float32)), x1)


def test_interpolate_per_row_times(pair):
    x0, x1 = pair
    t = np.array([0.0, 0.25, 1.0], np.float32)
    xt = interpolate(x0, x1, t)
    assert xt.shape == x0.shape
    np.testing.assert_array_equal(xt[0], x0[0])
    np.testing.assert_allclose(xt[1], 0.25 * x1[1] + 0.75 * x0[1], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(xt[2], x1[2])


def test_target_velocity_is_the_derivative_of_the_path(pair):
    x0, x1 = pair
    v = target_velocity(x0, x1)
    np.testing.assert_array_equal(v, x1 - x0)
    # d/dt x_t is constant along the straight path: a finite difference recovers v exactly (up to rounding)
    t, h = np.full(3, 0.3, np.float32), np.float32(0.25)
    fd = (interpolate(x0, x1, t + h) - interpolate(x0, x1, t)) / h
    np.testing.assert_allclose(fd, v, rtol=0, atol=1e-5)


def test_interpolate_works_on_torch_and_jax(pair):
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    x0, x1 = pair
    t = np.array([0.1, 0.5, 0.9], np.float32)
    ref = interpolate(x0, x1, t)
    got_torch = interpolate(torch.from_numpy(x0), torch.from_numpy(x1), torch.from_numpy(t)).numpy()
    got_jax = np.asarray(interpolate(jnp.asarray(x0), jnp.asarray(x1), jnp.asarray(t)))
    np.testing.assert_allclose(got_torch, ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got_jax, ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 7, 50])
def test_time_grid(n):
    grid = time_grid(n)
    assert grid.shape == (n + 1,)
    assert grid.dtype == np.float32
    assert grid[0] == 0.0
    assert grid[-1] == 1.0
    assert np.all(np.diff(grid) > 0)
    np.testing.assert_allclose(np.diff(grid), 1.0 / n, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n", [0, -1])
def test_time_grid_rejects_fewer_than_one_step(n):
    with pytest.raises(ValueError, match="num_steps >= 1"):
        time_grid(n)


def test_euler_step():
    x = np.array([[1.0, 2.0]], np.float32)
    v = np.array([[4.0, -2.0]], np.float32)
    np.testing.assert_allclose(euler_step(x, v, 0.25, 0.75), [[3.0, 1.0]])
    np.testing.assert_array_equal(euler_step(x, v, 0.5, 0.5), x)  # a zero step changes nothing
    # pure: the inputs are untouched
    np.testing.assert_array_equal(x, [[1.0, 2.0]])


def test_guided_velocity_scalar():
    rng = np.random.default_rng(1)
    v_cond, v_null = rng.standard_normal((2, 4, *IMAGE_SHAPE)).astype(np.float32)
    np.testing.assert_allclose(guided_velocity(v_cond, v_null, 1.0), v_cond, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(guided_velocity(v_cond, v_null, 0.0), v_null)
    np.testing.assert_allclose(
        guided_velocity(v_cond, v_null, 3.0), v_null + 3.0 * (v_cond - v_null), rtol=0, atol=1e-6
    )


def test_guided_velocity_per_row():
    rng = np.random.default_rng(2)
    v_cond, v_null = rng.standard_normal((2, 3, *IMAGE_SHAPE)).astype(np.float32)
    g = np.array([1.0, 0.0, 2.5], np.float32)
    out = guided_velocity(v_cond, v_null, g)
    assert out.shape == v_cond.shape
    np.testing.assert_allclose(out[0], v_cond[0], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(out[1], v_null[1])
    np.testing.assert_allclose(out[2], v_null[2] + 2.5 * (v_cond[2] - v_null[2]), rtol=0, atol=1e-5)


def test_pad_to_32_and_to_uint8_round_trip():
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    imgs[0] = 0
    imgs[1] = 255
    x = pad_to_32(imgs)
    assert x.shape == (5, *IMAGE_SHAPE)
    assert x.dtype == np.float32
    assert x.min() >= -1.0 and x.max() <= 1.0
    assert np.all(x[:, :, :2, :] == -1.0) and np.all(x[:, :, -2:, :] == -1.0)  # black border
    assert np.all(x[:, :, :, :2] == -1.0) and np.all(x[:, :, :, -2:] == -1.0)
    assert np.all(x[1, :, 2:30, 2:30] == 1.0)
    back = to_uint8(x)
    assert back.dtype == np.uint8 and back.shape == (5, 32, 32)
    np.testing.assert_array_equal(back[:, 2:30, 2:30], imgs)
    assert np.all(back[:, :2] == 0) and np.all(back[:, :, -2:] == 0)


def test_to_uint8_clips_out_of_range():
    x = np.array([-3.0, -1.0, 0.0, 1.0, 5.0], np.float32).reshape(1, 1, 1, 5)
    np.testing.assert_array_equal(to_uint8(x)[0, 0], [0, 0, 128, 255, 255])


def _euler(velocity, x, grid):
    for i in range(len(grid) - 1):
        x = euler_step(x, velocity(x, grid[i]), grid[i], grid[i + 1])
    return x


@pytest.mark.parametrize("n", [1, 2, 5, 16, 100])
def test_euler_lands_on_the_target_of_the_conditional_flow(n):
    """v(x, t) = (x1 - x) / (1 - t) is the exact conditional velocity toward x1: Euler is exact."""
    rng = np.random.default_rng(4)
    x1 = rng.uniform(-1, 1, (2, *IMAGE_SHAPE)).astype(np.float32)
    x0 = rng.standard_normal((2, *IMAGE_SHAPE)).astype(np.float32)

    def velocity(x, t):
        assert t < 1.0  # Euler never evaluates the field at t = 1, where it is singular
        return (x1 - x) / (1.0 - t)

    grid = time_grid(n)
    out = _euler(velocity, x0, grid)
    np.testing.assert_allclose(out, x1, rtol=0, atol=1e-5)
    # and every intermediate point lies on the straight path x_t = t x1 + (1 - t) x0
    x = x0
    for i in range(n):
        x = euler_step(x, velocity(x, grid[i]), grid[i], grid[i + 1])
        t_next = np.full(2, grid[i + 1], np.float32)
        np.testing.assert_allclose(x, interpolate(x0, x1, t_next), rtol=0, atol=1e-5)


def test_euler_is_first_order_on_a_linear_field():
    """v = a x has x(1) = x0 exp(a); Euler's global error shrinks as O(1/N)."""
    a = 1.0
    x0 = np.array([[0.5, -1.0, 2.0]], np.float64)
    exact = x0 * np.exp(a)

    def error(n):
        out = _euler(lambda x, t: a * x, x0, time_grid(n).astype(np.float64))
        return float(np.max(np.abs(out - exact)))

    errs = {n: error(n) for n in (25, 50, 100, 200)}
    for n in (25, 50, 100):
        ratio = errs[n] / errs[2 * n]
        assert 1.9 < ratio < 2.1, (n, ratio, errs)
    # leading term of the error: x0 e^a a^2 / (2N)
    np.testing.assert_allclose(errs[200], np.max(np.abs(x0)) * np.exp(a) * a**2 / 400, rtol=0.02)
