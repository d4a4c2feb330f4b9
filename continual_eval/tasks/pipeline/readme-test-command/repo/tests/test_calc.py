from calc import add


def test_add() -> None:
    assert add(2, 3) == 5
    assert add(-2, 3) == 1


if __name__ == "__main__":
    test_add()
    print("1 passed")
