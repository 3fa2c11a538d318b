"""Sequence models of the zoo: CRNN text recognizers, a conv backbone read as a sequence along the
width by recurrent layers, then a CTC head (see :mod:`relax_vk.zoo`)."""

from __future__ import annotations

from .layers import nn


class CRNN(nn.Module):
    """CRNN (Shi et al.): conv + BN + ReLU blocks with max pools that bring a 32-pixel-high line to
    height 1 and its width to W/4, a 2-layer bidirectional LSTM of 48 units along the width, and a
    linear CTC head over 37 symbols (log-probabilities, ``[W/4, batch, 37]``)."""

    cell = nn.LSTM

    def __init__(self):
        super().__init__()

        def block(cin, cout, pool):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(pool)]

        self.cnn = nn.Sequential(*block(3, 16, 2), *block(16, 32, 2), *block(32, 64, (2, 1)), *block(64, 64, (4, 1)))
        self.rnn = self.cell(64, 48, num_layers=2, bidirectional=True)
        self.head = nn.Linear(96, 37)

    def forward(self, x):
        features = self.cnn(x).squeeze(2).permute(2, 0, 1)  # [W/4, batch, 64]
        return self.head(self.rnn(features)[0]).log_softmax(-1)


class CRNNGRU(CRNN):
    """The CRNN with a 2-layer bidirectional GRU in place of the LSTM."""

    cell = nn.GRU
