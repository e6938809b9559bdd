from support import children


def test_support_importable():
    assert isinstance(children(), set)
