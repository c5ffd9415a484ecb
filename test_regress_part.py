def test_multi_clip_test_views_hold_their_own_frames(tmp_path):
    # Frame k has pixel value k. 10 test clips of 16x4 over 214 frames interleave without sharing frames:
    # each view must still hold exactly its clip's frames, in order (decoding each frame once must not mix them).
    os.makedirs(tmp_path / "v")
    for k in range(1, 215):
        Image.fromarray(np.full((40, 48, 3), k, np.uint8)).save(tmp_path / "v" / f"img_{k:05d}.png")
    (tmp_path / "l.txt").write_text("v 214 0\n")
    ds = data.VideoFrameDataset(tmp_path / "l.txt", image_tmpl="img_{:05d}.png", mode="test", num_clips=10,
                                num_crops=3, t_length=16, t_stride=4, new_size=40, crop_size=40)
    clip, _ = ds[0]
    got = clip[:, 0, :, 20, 20].numpy().reshape(10, 3, 16)  # (clips, crops, T)
    want = data.sample_indices(214, 16, 4, "test", 10)
    assert (got == want[:, None, :]).all()
