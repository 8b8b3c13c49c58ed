"""Support code that tests/ and bench/ share: reference probers and helpers to drive the product.

Never shipped (not in the wheel or the image), and no product package imports it
(tests/unit/repo/test_import_direction.py): the product holds product code only.
"""
