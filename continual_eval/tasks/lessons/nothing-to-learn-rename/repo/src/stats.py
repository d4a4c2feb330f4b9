def sum_list(xs: list[float]) -> float:
    return sum(xs)
