"""Named experiments that reproduce and check the papers' claims."""
