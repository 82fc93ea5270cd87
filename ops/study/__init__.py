"""The DDM-vs-monolith study and the shipped demo: study.sh, ship_mnist.sh, their tables and model cards."""
