from slug import slugify


def check_single_word() -> None:
    assert slugify("Word") == "word"
