"""Stored collections: a dataset encoded once into gated sparse vectors ``E = V ⊙ G`` (VDR)
and kept on disk for search, deviation and comparison.

- :mod:`.options`: a build's settings, declared once (``IndexOptions``: the command line's
  flags and the page's widgets come from it); :mod:`.arguments`: the entry points'
  arguments checked, each wrong one named;
- :mod:`.indexing`: the entry points of a build (``lexlens.build_index``, ``lexlens index``)
  and the one place a source is opened (``sample:NAME``, benchmarks), which choose one of
  the builds below; :mod:`.workspace_build`: the Collections page's build (a named
  collection, typed paths held to the data roots);
- :mod:`.source_index`: a source of texts or images, in this process or on Ray
  (:mod:`.ray_encode`); :mod:`.features_index`: dense features through a D2S head;
- :mod:`.build_parts` and :mod:`.encoding`: what every build shares;
- :mod:`.sources`: what a source is and its items; :mod:`.feature_files`: dense feature
  files with their ids and captions;
- :mod:`.store` (the format and its reader; its manifest typed in :mod:`.manifest`),
  :mod:`.stored` (what an analysis may ask of a stored collection: ``StoredCollection``),
  :mod:`.memory` (a small collection held in memory), :mod:`.store_writer` (atomic writes),
  :mod:`.postings` (the inverted index of large ones, read back as :mod:`.posting_blocks`),
  :mod:`.npy_files` (streamed arrays);
- :mod:`.workspace`: where the app keeps its collections.
"""
